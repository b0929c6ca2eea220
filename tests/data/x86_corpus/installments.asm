; spread a debt over three monthly payments, the remainder in the first one
section .rodata
    account db "ACC-17", 0
    months  equ 3
section .data
    due dd 0
section .text
global _start
_start:
    push account
    call get_balance
    test eax, eax
    jns .nothing_due              ; nothing owed
    neg eax
    mov [due], eax
    mov ebx, [due]
    idiv ebx, months              ; each payment
    mov edx, [due]
    mod edx, months               ; what is left over
    add edx, ebx                  ; the first payment takes it
    mov ecx, months
.pay:
    push edx
    call schedule_payment
    mov edx, ebx
    loop .pay
.nothing_due:
    hlt
