section .data
    route_x dd 2, 8, 8, 2
    route_y dd 2, 2, 8, 8
section .text
    push dword [route_x + 16]
    push dword [route_y + 16]
    call move_to
