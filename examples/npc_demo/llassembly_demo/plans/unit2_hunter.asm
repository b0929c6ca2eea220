; HAND-WRITTEN PLAN: written by a person for the demo's bundled replay model, which answers
; the order below with this file. It is not the output of a language model.
; order: Pick up the sword, attack enemies until none remain, then drop the sword and go to 4,4.
        MOV R10, 0              ; tries in a row that got nowhere
get_sword:
        CALL pick_sword
        POP R1                  ; 1 = picked up
        CMP R1, 1
        JE hunt
        CALL get_sword_position
        POP R2                  ; x, -1 = no sword on the ground
        POP R3                  ; y
        CMP R2, -1
        JE go_home
        PUSH R2
        PUSH R3
        CALL make_one_step
        POP R0
        INC R10
        CMP R10, 20
        JL get_sword
        JMP go_home             ; never reached it
hunt:
        MOV R10, 0
        CALL find_nearest_enemy
        POP R5                  ; enemy id, 0 = none left
        CMP R5, 0
        JE finish
strike:
        PUSH R5
        CALL attack_enemy
        POP R6                  ; hit points left; 0 = dead, -1 = no hit
        CMP R6, 0
        JG strike               ; still alive: hit again
        JE hunt                 ; dead: next enemy
        PUSH R5                 ; no hit: walk towards it
        CALL get_enemy_position
        POP R7
        POP R8
        CMP R7, -1
        JE hunt                 ; someone else killed it
        PUSH R7
        PUSH R8
        CALL make_one_step
        POP R9                  ; 1 = moved
        CMP R9, 1
        JE closer
        INC R10
        CMP R10, 6
        JL strike
        JMP finish              ; blocked six times in a row: give up the hunt
closer:
        MOV R10, 0
        JMP strike
finish:
        CALL drop_sword
        POP R0
go_home:
        MOV R1, 4
        MOV R2, 4
        CALL goto
        HLT

goto:                           ; walk to (R1, R2); give up after 4 failed steps in a row
        MOV R10, 0
goto_step:
        PUSH R1
        PUSH R2
        CALL make_one_step
        POP R9
        CMP R9, 1
        JE goto_moved
        CALL get_current_position
        POP R3
        POP R4
        CMP R3, R1
        JNE goto_blocked
        CMP R4, R2
        JE goto_done            ; arrived
goto_blocked:
        INC R10
        CMP R10, 4
        JL goto_step
goto_done:
        RET
goto_moved:
        MOV R10, 0
        JMP goto_step
